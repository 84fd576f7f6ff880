// Reading a request body whole, bounded in size and in time: for the routes whose bodies are judged
// before they are forwarded (the bytes are kept and forwarded as received).
import type { IncomingHttpHeaders, IncomingMessage } from 'node:http';
import type { BodyHold } from './budget.js';
import type { LimitsConfig, PolicyConfig } from '../config/schema.js';
import { closingConnection, Errors, GatewayError, requestTooLarge } from '../errors.js';

/** Whether a request's head frames a body (RFC 9112 §6.3): Transfer-Encoding, or a Content-Length other than 0. */
export function declaresBody(headers: IncomingHttpHeaders): boolean {
  const length = headers['content-length'];
  return headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0');
}

export interface BodyReadLimits {
  readonly maxBytes: number;
  /** The setting maxBytes comes from, named in a refusal. */
  readonly maxBytesKey: string;
  readonly timeoutMs: number;
  /** The setting timeoutMs comes from, named in a refusal. */
  readonly timeoutKey: string;
}

/**
 * How a body read for a few fields as it arrives is bounded: limits.bodyBytes (the participant's own
 * limit: no tree is built), within policy.bodyReadTimeoutMs.
 */
export function streamedBodyLimits(policy: PolicyConfig, limits: LimitsConfig): BodyReadLimits {
  return {
    maxBytes: limits.bodyBytes,
    maxBytesKey: 'limits.bodyBytes',
    timeoutMs: policy.bodyReadTimeoutMs,
    timeoutKey: 'policy.bodyReadTimeoutMs',
  };
}

/**
 * How a body read whole for judging is bounded: limits.bodyBytes, or policy.maxBodyBytes when it is set
 * lower (each named in a refusal), within policy.bodyReadTimeoutMs.
 */
export function ruleCheckedBodyLimits(policy: PolicyConfig, limits: LimitsConfig): BodyReadLimits {
  const own = policy.maxBodyBytes;
  const ownLimit = own !== undefined && own < limits.bodyBytes;
  return {
    maxBytes: ownLimit ? own : limits.bodyBytes,
    maxBytesKey: ownLimit ? 'policy.maxBodyBytes' : 'limits.bodyBytes',
    timeoutMs: policy.bodyReadTimeoutMs,
    timeoutKey: 'policy.bodyReadTimeoutMs',
  };
}

function malformed(cause: string): GatewayError {
  return closingConnection(new GatewayError(Errors.GATEWAY_MALFORMED_REQUEST, { cause }));
}

/**
 * Reads the whole request body into one Buffer, held against `hold` (the process's body budget). A
 * declared Content-Length above the limit, or above what the budget has free now, is refused at once,
 * before a byte is read; the budget counts the bytes as they arrive, never what the head declares (a
 * declared length reserved up front let connections that sent no body fill the budget). Every refusal closes the connection (the rest of
 * the body is not read as a next request).
 */
export function readRequestBody(
  raw: IncomingMessage,
  limits: BodyReadLimits,
  hold: BodyHold,
  onChunk?: (chunk: Buffer) => void,
): Promise<Buffer> {
  const tooLarge = () => closingConnection(requestTooLarge(limits.maxBytes, limits.maxBytesKey));
  const declared = raw.headers['content-length'];
  if (declared !== undefined && Number(declared) > limits.maxBytes) return Promise.reject(tooLarge());
  const unfit = declared === undefined ? undefined : hold.admits(Number(declared));
  if (unfit !== undefined) return Promise.reject(unfit);
  if (raw.readableEnded) return Promise.resolve(Buffer.alloc(0));
  return new Promise<Buffer>((resolve, reject) => {
    const gathered = gatherer(declared === undefined ? undefined : Number(declared));
    let size = 0;
    const finish = (error: GatewayError | undefined) => {
      clearTimeout(timer);
      raw.off('data', onData);
      raw.off('end', onEnd);
      raw.off('error', onError);
      raw.off('close', onClose);
      if (error === undefined) {
        resolve(gathered.whole(size));
        return;
      }
      raw.resume(); // discard the rest; the answer closes the connection
      reject(error);
    };
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      const refused = size > limits.maxBytes ? tooLarge() : (hold.take(chunk.length) ?? judged(chunk));
      if (refused !== undefined) return finish(refused);
      gathered.add(chunk, size);
    };
    /** `onChunk`'s refusal of the body so far (a tokenizer's), which ends the read. */
    const judged = (chunk: Buffer): GatewayError | undefined => {
      try {
        onChunk?.(chunk);
        return undefined;
      } catch (error) {
        return closingConnection(error instanceof GatewayError ? error : malformed(String(error)));
      }
    };
    const onEnd = () => finish(undefined);
    const onError = () => finish(malformed('The request body could not be read: the client connection failed.'));
    const onClose = () => {
      if (!raw.readableEnded) finish(malformed('The request body ended before it was complete.'));
    };
    const timer = setTimeout(() => {
      finish(malformed(`The request body was not received within ${limits.timeoutMs} ms (${limits.timeoutKey}).`));
    }, limits.timeoutMs);
    raw.on('data', onData);
    raw.on('end', onEnd);
    raw.on('error', onError);
    raw.on('close', onClose);
  });
}

/** Bodies declared at least this long are gathered in one buffer of their length (gatherer). */
const GATHERED_IN_PLACE_BYTES = 256 * 1024;

interface Gatherer {
  /** Keeps `chunk`, which ends `end` bytes into the body. */
  add(chunk: Buffer, end: number): void;
  /** The body's `size` bytes, in memory of their own. */
  whole(size: number): Buffer;
}

/**
 * Where a body's bytes gather. A large declared body: its chunks until half of it has arrived, then
 * one buffer of its declared length, which each chunk is copied into as it arrives and let go, so
 * that the body is not held twice at its end (its chunks and their concatenation: one 8 MiB body
 * more per body read, docs/performance.md). Not before half has arrived: a declared length is only a
 * claim, and a buffer made for it counts in V8's accounting of memory whatever was sent. Any other
 * body: its chunks, joined at the end.
 */
function gatherer(declared: number | undefined): Gatherer {
  const chunks: Buffer[] = [];
  let body: Buffer | undefined;
  const inPlace = declared !== undefined && declared >= GATHERED_IN_PLACE_BYTES;
  return {
    add(chunk, end) {
      if (body !== undefined) return void chunk.copy(body, end - chunk.length);
      chunks.push(chunk);
      if (!inPlace || end * 2 < declared) return;
      body = Buffer.allocUnsafeSlow(declared);
      let at = 0;
      for (const kept of chunks) at += kept.copy(body, at);
      chunks.length = 0;
    },
    whole: (size) => (body === undefined ? Buffer.concat(chunks, size) : body.subarray(0, size)),
  };
}
