// The body of a forwarded call: read whole before the call takes an upstream connection when it fits
// upstream.bufferBodyBytes (nginx buffers a request body before it connects upstream, Envoy's buffer
// filter likewise), streamed to the participant as it arrives when larger. Either way it must keep a
// pace (upstream.bodyIdleTimeoutMs, upstream.bodyMinBytesPerSecond), or it is cut with a 408.
import type { IncomingMessage } from 'node:http';
import { Transform, type TransformCallback } from 'node:stream';
import type { BodyHold } from '../body/budget.js';
import { closingConnection, Errors, GatewayError } from '../errors.js';

export interface UploadLimits {
  /** limits.bodyBytes: larger is refused with 413. */
  readonly maxBytes: number;
  /** upstream.bufferBodyBytes: a body up to this size is read whole before it is sent. */
  readonly bufferBytes: number;
  /** upstream.bodyIdleTimeoutMs: the window the pace is judged over. */
  readonly windowMs: number;
  /** upstream.bodyMinBytesPerSecond: the least average pace over a window (0: any byte). */
  readonly minBytesPerSecond: number;
}

export function tooLarge(limit: number): GatewayError {
  return new GatewayError(Errors.GATEWAY_REQUEST_TOO_LARGE, {
    cause: `The request body is larger than ${limit} bytes.`,
  });
}

function tooSlow(bytes: number, limits: UploadLimits): GatewayError {
  const cause =
    bytes === 0
      ? `No byte of the request body arrived for ${limits.windowMs} ms (upstream.bodyIdleTimeoutMs).`
      : `The request body arrived slower than ${limits.minBytesPerSecond} bytes per second ` +
        `over ${limits.windowMs} ms ` +
        '(upstream.bodyMinBytesPerSecond).';
  return closingConnection(
    new GatewayError(
      Errors.GATEWAY_CLIENT_TIMEOUT,
      { cause },
      { reason: `body too slow: ${bytes} bytes in ${limits.windowMs} ms` },
    ),
  );
}

const nothingHeld = () => false;

/**
 * Judges a body's pace once per window: a window that brought fewer bytes than the minimum (at
 * least one) cuts it. A window in which the gateway itself held the body back (the participant not
 * reading it yet) is not judged: its slowness is not the client's.
 */
class UploadPace {
  private bytes = 0;
  private timer: NodeJS.Timeout | undefined;
  private readonly least: number;

  constructor(
    private readonly limits: UploadLimits,
    private readonly cut: (error: GatewayError) => void,
    private readonly held: () => boolean = nothingHeld,
  ) {
    this.least = Math.max(1, Math.ceil((limits.minBytesPerSecond * limits.windowMs) / 1000));
  }

  start(): void {
    this.bytes = 0;
    this.timer ??= setInterval(this.judge, this.limits.windowMs).unref();
  }

  add(bytes: number): void {
    this.bytes += bytes;
  }

  stop(): void {
    clearInterval(this.timer);
  }

  private readonly judge = (): void => {
    const bytes = this.bytes;
    this.bytes = 0;
    if (bytes >= this.least || this.held()) return;
    this.stop();
    this.cut(tooSlow(bytes, this.limits));
  };
}

/** The first bytes of a body larger than upstream.bufferBytes; the rest is still unread. */
export interface UploadPrefix {
  readonly prefix: readonly Buffer[];
}

const EMPTY = Buffer.alloc(0);

/**
 * Reads a body whole when it ends within limits.bufferBytes, held against `hold` (the process's body
 * budget, counted as its bytes arrive, never from what the head declares); resolves with what was read
 * so far (the request paused, the hold given back: the rest streams on the caller's upload share) once
 * it grows past that, and with undefined when the client left (nobody to answer). Rejects with 413 past
 * limits.maxBytes, 408 for a body that does not keep the pace, and the budget's refusal; each closes
 * the connection (the rest of the body is never read).
 */
export function readUpload(
  raw: IncomingMessage,
  limits: UploadLimits,
  hold: BodyHold,
): Promise<Buffer | UploadPrefix | undefined> {
  if (raw.readableEnded) return Promise.resolve(EMPTY);
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const finish = () => {
      pace.stop();
      raw.off('data', onData);
      raw.off('end', onEnd);
      raw.off('close', onClose);
      raw.off('error', onClose);
    };
    const pace = new UploadPace(limits, (error) => {
      finish();
      reject(error);
    });
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      pace.add(chunk.length);
      chunks.push(chunk);
      const refused = size <= limits.bufferBytes ? hold.take(chunk.length) : undefined;
      if (size > limits.maxBytes) {
        finish();
        reject(closingConnection(tooLarge(limits.maxBytes)));
      } else if (refused !== undefined) {
        finish();
        reject(refused);
      } else if (size > limits.bufferBytes) {
        raw.pause(); // before its last 'data' listener goes: a flowing request would drop the rest
        finish();
        hold.release();
        resolve({ prefix: chunks });
      }
    };
    const onEnd = () => {
      finish();
      resolve(Buffer.concat(chunks, size));
    };
    const onClose = () => {
      if (raw.complete) return; // 'end' settles it
      finish();
      resolve(undefined);
    };
    raw.on('data', onData);
    raw.on('end', onEnd);
    raw.on('close', onClose);
    raw.on('error', onClose);
    pace.start();
  });
}

/**
 * A body streamed to the participant: counts it against limits.maxBytes as it passes (a chunked
 * body declares no length for Node's parser to enforce) and, once watched (the call is handed to
 * the pool), judges its pace. Fails with the coded error; undici then aborts the upstream call.
 */
export class UploadStream extends Transform {
  private seen = 0;
  private readonly pace: UploadPace;

  constructor(
    private readonly limits: UploadLimits,
    prefix: readonly Buffer[],
  ) {
    super();
    // Held back when what the client sent waits here for the participant to read it.
    this.pace = new UploadPace(
      limits,
      (error) => this.destroy(error),
      () => this.readableLength > 0 || this.writableLength > 0,
    );
    for (const chunk of prefix) this.write(chunk);
  }

  /** Starts judging the pace: from when the participant can read the body. */
  watchPace(): void {
    if (!this.destroyed) this.pace.start();
  }

  override _transform(chunk: Buffer, _encoding: BufferEncoding, callback: TransformCallback): void {
    this.seen += chunk.length;
    if (this.seen > this.limits.maxBytes) {
      callback(tooLarge(this.limits.maxBytes));
      return;
    }
    this.pace.add(chunk.length);
    callback(null, chunk);
  }

  override _flush(callback: TransformCallback): void {
    this.pace.stop();
    callback();
  }

  override _destroy(error: Error | null, callback: (error?: Error | null) => void): void {
    this.pace.stop();
    callback(error);
  }
}
