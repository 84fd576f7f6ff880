// The readiness probe's call to the participant, on a connection of its own: on the traffic pool it
// queued behind busy connections, and a saturated but healthy participant read as unready.
import { Pool } from 'undici';

/** Marks the readiness probe's calls in the participant's logs. */
export const READINESS_USER_AGENT = 'ledger-gateway-readiness';

/** The participant answered (anything below 500), or why not: 'refused', 'timeout', 'status 503', ... */
export type ProbeOutcome = { readonly answers: true } | { readonly answers: false; readonly cause: string };

export interface UpstreamProbe {
  /** GET /v2/version with a short bound: does the participant answer at all, and if not, why? */
  probe: (timeoutMs: number) => Promise<ProbeOutcome>;
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

export function createUpstreamProbe(origin: string, basePath: string, poolOptions: Pool.Options): UpstreamProbe {
  const client = new Pool(origin, { ...poolOptions, connections: 1 });
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
    close: () => client.destroy(),
  };
}
