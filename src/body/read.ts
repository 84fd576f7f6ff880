// Reading a request body whole, bounded in size and in time: for the routes whose bodies are judged
// before they are forwarded (the bytes are kept and forwarded as received).
import type { IncomingMessage } from 'node:http';
import type { BodyHold } from './budget.js';
import { closingConnection, Errors, GatewayError, requestTooLarge } from '../errors.js';

export interface BodyReadLimits {
  readonly maxBytes: number;
  /** The setting maxBytes comes from, named in a refusal. */
  readonly maxBytesKey: string;
  readonly timeoutMs: number;
  /** The setting timeoutMs comes from, named in a refusal. */
  readonly timeoutKey: string;
}

function malformed(cause: string): GatewayError {
  return closingConnection(new GatewayError(Errors.GATEWAY_MALFORMED_REQUEST, { cause }));
}

/**
 * Reads the whole request body into one Buffer, held against `hold` (the process's body budget). A
 * declared Content-Length above the limit, or one the budget cannot hold, is refused at once, before a
 * byte is read; a chunked body is counted as it arrives. Every refusal closes the connection (the rest
 * of the body is not read as a next request).
 */
export function readRequestBody(raw: IncomingMessage, limits: BodyReadLimits, hold: BodyHold): Promise<Buffer> {
  const tooLarge = () => closingConnection(requestTooLarge(limits.maxBytes, limits.maxBytesKey));
  const declared = raw.headers['content-length'];
  if (declared !== undefined && Number(declared) > limits.maxBytes) return Promise.reject(tooLarge());
  if (raw.readableEnded) return Promise.resolve(Buffer.alloc(0));
  // Node's parser delivers exactly the declared length: it is taken whole, up front.
  const counted = declared === undefined;
  const refused = counted ? undefined : hold.take(Number(declared));
  if (refused !== undefined) return Promise.reject(refused);
  return new Promise<Buffer>((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const finish = (error: GatewayError | undefined) => {
      clearTimeout(timer);
      raw.off('data', onData);
      raw.off('end', onEnd);
      raw.off('error', onError);
      raw.off('close', onClose);
      if (error === undefined) {
        resolve(Buffer.concat(chunks, size));
        return;
      }
      raw.resume(); // discard the rest; the answer closes the connection
      reject(error);
    };
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      const refused = size > limits.maxBytes ? tooLarge() : counted ? hold.take(chunk.length) : undefined;
      if (refused === undefined) chunks.push(chunk);
      else finish(refused);
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
