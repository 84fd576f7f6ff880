// The readiness probe's call to the participant, on a connection of its own: on the traffic pool it
// queued behind busy connections, and a saturated but healthy participant read as unready.
import { Pool } from 'undici';

/** Marks the readiness probe's calls in the participant's logs. */
export const READINESS_USER_AGENT = 'ledger-gateway-readiness';

export interface UpstreamProbe {
  /** GET /v2/version with a short bound: does the participant answer at all (anything below 500)? */
  probe: (timeoutMs: number) => Promise<boolean>;
  close(): Promise<void>;
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
        return statusCode < 500;
      } catch {
        return false;
      }
    },
    close: () => client.destroy(),
  };
}
