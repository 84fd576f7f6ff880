// The gateway's own calls to the participant (the readiness probe, the listing of its identity
// providers), on connections of their own: on the traffic pool the probe queued behind busy
// connections, a saturated but healthy participant read as unready, and the clients' connections and
// slots are theirs. Two connections: the probe and a listing each run one at a time, and neither
// waits behind the other.
import { Pool } from 'undici';

/** Marks the readiness probe's calls in the participant's logs. */
export const READINESS_USER_AGENT = 'ledger-gateway-readiness';

/** The participant answered (anything below 500), or why not: 'refused', 'timeout', 'status 503', ... */
export type ProbeOutcome = { readonly answers: true } | { readonly answers: false; readonly cause: string };

/** A GET of the gateway's own (it names itself in `user-agent`), bounded in time and answer size. */
export interface OwnRequest {
  /** The path below the replica's base URL, e.g. /v2/idps. */
  readonly path: string;
  readonly headers: Readonly<Record<string, string>>;
  /** Bound on the whole call: connection, headers and body. */
  readonly timeoutMs: number;
  /** A longer answer is a failure (its body is not read on). */
  readonly maxBytes: number;
}

export interface OwnAnswer {
  readonly statusCode: number;
  readonly body: Buffer;
}

/** An own call that failed; `code` is undici's or the system's (ECONNREFUSED, ...) when it has one. */
export class OwnCallFailure extends Error {
  constructor(
    message: string,
    readonly code: string | undefined,
  ) {
    super(message);
  }
}

export interface UpstreamProbe {
  /** GET /v2/version with a short bound: does the participant answer at all, and if not, why? */
  probe: (timeoutMs: number) => Promise<ProbeOutcome>;
  /** Another own call (the identity provider listing): the whole answer, or an OwnCallFailure with a short cause. */
  get: (request: OwnRequest) => Promise<OwnAnswer>;
  close(): Promise<void>;
}

const TIMEOUT_CODES = new Set(['UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT', 'UND_ERR_CONNECT_TIMEOUT']);

/** A short, log-friendly cause of a failed probe; never the URL (it may carry credentials). */
export function probeFailureCause(error: unknown): string {
  const { name, code } = error as { name?: unknown; code?: unknown };
  if (name === 'TimeoutError' || (typeof code === 'string' && TIMEOUT_CODES.has(code))) return 'timeout';
  if (code === 'ECONNREFUSED') return 'refused';
  if (code === 'ECONNRESET' || code === 'UND_ERR_SOCKET') return 'reset';
  if (code === 'ENOTFOUND' || code === 'EAI_AGAIN') return 'dns';
  return typeof code === 'string' ? code : 'error';
}

const answerTooLarge = (maxBytes: number) =>
  new OwnCallFailure(`the answer is larger than ${maxBytes} bytes`, 'ANSWER_TOO_LARGE');

async function readWhole(body: AsyncIterable<Buffer>, maxBytes: number): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of body) {
    size += chunk.length;
    if (size > maxBytes) throw answerTooLarge(maxBytes); // leaving the loop destroys the body
    chunks.push(chunk);
  }
  return Buffer.concat(chunks, size);
}

export function createUpstreamProbe(origin: string, basePath: string, poolOptions: Pool.Options): UpstreamProbe {
  const client = new Pool(origin, { ...poolOptions, connections: 2 });
  return {
    async probe(timeoutMs) {
      try {
        const { statusCode, body } = await client.request({
          path: `${basePath}/v2/version`,
          method: 'GET',
          headers: { 'user-agent': READINESS_USER_AGENT },
          headersTimeout: timeoutMs,
          bodyTimeout: timeoutMs,
          signal: AbortSignal.timeout(timeoutMs),
        });
        await body.dump();
        return statusCode < 500 ? { answers: true } : { answers: false, cause: `status ${statusCode}` };
      } catch (error) {
        return { answers: false, cause: probeFailureCause(error) };
      }
    },
    async get(request) {
      try {
        const { statusCode, headers, body } = await client.request({
          path: basePath + request.path,
          method: 'GET',
          headers: request.headers,
          headersTimeout: request.timeoutMs,
          bodyTimeout: request.timeoutMs,
          signal: AbortSignal.timeout(request.timeoutMs),
        });
        if (Number(headers['content-length'] ?? 0) > request.maxBytes) {
          body.destroy();
          throw answerTooLarge(request.maxBytes);
        }
        return { statusCode, body: await readWhole(body, request.maxBytes) };
      } catch (error) {
        if (error instanceof OwnCallFailure) throw error;
        const { code } = error as { code?: unknown };
        throw new OwnCallFailure(probeFailureCause(error), typeof code === 'string' ? code : undefined);
      }
    },
    close: () => client.destroy(),
  };
}
