// Rule-checked bodies larger than the event loop may parse in one go (body/parse-turns.ts: the worst
// 8 MiB body held it 4 to 7 s) are judged in a bounded pool of worker threads (piscina), as the
// prepared transactions are (ledger-policy/prepared-pool.ts). Each worker has a bounded heap
// (resourceLimits): a body whose tree passes it kills only its worker, and is refused as too large.
// Every wait is bounded: a full queue or a judgement past the timeout refuses the call as
// unavailable (retry), never queues it without end. A body's bytes are never copied: they are moved
// to the worker when it takes the body, and moved back with its verdict.
import { fileURLToPath } from 'node:url';
import { Piscina } from 'piscina';
import { Errors, GatewayError, type ErrorDefinition } from '../errors.js';
import type { TreeBounds } from '../body/tree-size.js';
import type { LargeBodyOutcome, LargeBodyTask, WireError } from './large-body-worker.js';

export interface LargeBodyPoolOptions {
  readonly workerThreads: number;
  /** Bodies waiting for a worker at most; past it a call is refused. */
  readonly maxQueue: number;
  /** Bound on one judgement, waiting included. */
  readonly timeoutMs: number;
  /** A worker's heap: its old generation, in MiB (its young generation is a quarter of it). */
  readonly heapMb: number;
  /** The largest tree a body may parse to in that heap: larger is refused (413) before it is built. */
  readonly treeBounds: TreeBounds;
}

/** What the worker made of a body: its excerpt for the audit trail, its rule's refusal if any, and the bytes back. */
export interface LargeBodyVerdict {
  readonly excerpt: Record<string, unknown>;
  readonly violation: GatewayError | undefined;
  readonly bytes: Buffer;
}

export interface LargeBodyPool {
  /**
   * The verdict, or throws the body's refusal (undecodable, too deep, too large to parse, pool busy).
   * `bytes` are lent to the worker (moved, so left empty here) and come back in the verdict; they are
   * lost only when the call is refused (the body's refusal, its worker stopped or was late).
   */
  judge(task: Omit<LargeBodyTask, 'bytes' | 'treeBounds'>, bytes: Buffer): Promise<LargeBodyVerdict>;
  close(): Promise<void>;
}

/**
 * The shipped pool: one thread (the sidecar has two cores; the other is the event loop's), whose heap
 * holds the worst 8 MiB body's tree (docs/performance.md, "Large rule-checked bodies").
 */
export const LARGE_BODY_POOL: LargeBodyPoolOptions = {
  workerThreads: 1,
  maxQueue: 32,
  timeoutMs: 20_000,
  heapMb: 32,
  treeBounds: { containers: 600_000, values: 1_500_000, keysOfOneObject: 100_000 },
};

/** The worker's file: its built twin in dist/ when these sources run as TypeScript (vitest builds dist/ first). */
function workerFile(): string {
  const here = import.meta.url;
  const url = here.endsWith('.ts')
    ? new URL('../../dist/policy/large-body-worker.js', here)
    : new URL('./large-body-worker.js', here);
  return fileURLToPath(url);
}

const byCode = new Map<string, ErrorDefinition>(
  Object.values(Errors).map((definition) => [definition.code, definition]),
);

function rebuilt(wire: WireError): GatewayError {
  const definition = byCode.get(wire.code) ?? Errors.GATEWAY_INTERNAL_ERROR;
  return new GatewayError(definition, wire.details, wire.reason === undefined ? {} : { reason: wire.reason });
}

function unavailable(cause: string, error?: unknown): GatewayError {
  return new GatewayError(Errors.GATEWAY_RULE_CHECK_UNAVAILABLE, { cause }, { cause: error });
}

/** Why a worker did not answer: its heap bound (the body's fault: 413, no retry), or busy and late (503, retry). */
function failure(error: unknown, options: LargeBodyPoolOptions, bytes: number): GatewayError {
  const code = (error as { code?: unknown }).code;
  if (code === 'ERR_WORKER_OUT_OF_MEMORY')
    return new GatewayError(Errors.GATEWAY_REQUEST_TOO_LARGE, {
      cause: `The request body (${bytes} bytes) needs more memory to parse than a rule-check worker has (${options.heapMb} MiB).`,
    });
  if ((error as Error).name === 'AbortError' || (error as Error).name === 'TimeoutError')
    return unavailable(`The request body was not judged within ${options.timeoutMs} ms.`);
  return unavailable('The request body could not be judged: its rule-check worker stopped.', error);
}

/** The bytes as a view of memory of their own, to move: a read body's own (Buffer.concat), else a copy. */
function lendable(bytes: Buffer): Uint8Array {
  const whole = bytes.byteOffset === 0 && bytes.byteLength === bytes.buffer.byteLength;
  return whole && bytes.buffer instanceof ArrayBuffer ? new Uint8Array(bytes.buffer) : new Uint8Array(bytes);
}

export function createLargeBodyPool(options: LargeBodyPoolOptions): LargeBodyPool {
  const waiting: Array<() => void> = [];
  let working = 0;
  let pool: Piscina<LargeBodyTask, LargeBodyOutcome> | undefined;
  const poolOf = () =>
    (pool ??= new Piscina<LargeBodyTask, LargeBodyOutcome>({
      filename: workerFile(),
      minThreads: 0,
      maxThreads: options.workerThreads,
      idleTimeout: 30_000,
      resourceLimits: {
        maxOldGenerationSizeMb: options.heapMb,
        maxYoungGenerationSizeMb: Math.max(4, Math.round(options.heapMb / 8)),
      },
    }));

  /** A worker's turn, in arrival order; rejects when `signal` fires first. */
  function turn(signal: AbortSignal): Promise<void> {
    if (working < options.workerThreads) {
      working++;
      return Promise.resolve();
    }
    return new Promise((resolve, reject) => {
      const take = () => {
        signal.removeEventListener('abort', late);
        working++;
        resolve();
      };
      const late = () => {
        waiting.splice(waiting.indexOf(take), 1);
        reject(unavailable(`The request body waited ${options.timeoutMs} ms for a rule-check worker.`));
      };
      signal.addEventListener('abort', late, { once: true });
      waiting.push(take);
    });
  }

  function release(): void {
    working--;
    waiting.shift()?.();
  }

  async function judge(task: Omit<LargeBodyTask, 'bytes' | 'treeBounds'>, bytes: Buffer): Promise<LargeBodyVerdict> {
    if (working >= options.workerThreads && waiting.length >= options.maxQueue)
      throw unavailable(`${working + waiting.length} request bodies are being judged or wait for a rule-check worker.`);
    const signal = AbortSignal.timeout(options.timeoutMs);
    await turn(signal);
    let outcome: LargeBodyOutcome;
    const size = bytes.length;
    try {
      const lent = lendable(bytes);
      outcome = await poolOf().run(
        { ...task, bytes: lent, treeBounds: options.treeBounds },
        { signal, transferList: [lent.buffer as ArrayBuffer] },
      );
    } catch (error) {
      throw failure(error, options, size);
    } finally {
      release();
    }
    if ('refused' in outcome) throw rebuilt(outcome.refused);
    const back = Buffer.from(outcome.bytes.buffer, outcome.bytes.byteOffset, outcome.bytes.byteLength);
    return { excerpt: outcome.excerpt, violation: outcome.violation && rebuilt(outcome.violation), bytes: back };
  }

  return {
    judge,
    async close() {
      await pool?.destroy();
    },
  };
}
