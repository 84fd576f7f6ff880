// Why an upstream call failed, as the gateway's coded error (issue: 503 unreachable, 504 silent).
import { Errors, GatewayError } from '../errors.js';

const TIMEOUT_CODES = new Set(['UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT']);

/** Maps a transport failure before the participant's answer started; never leaks internals. */
export function upstreamFailure(error: unknown): GatewayError {
  if (error instanceof GatewayError) return error;
  const code = (error as { code?: string } | null)?.code;
  if (code !== undefined && TIMEOUT_CODES.has(code)) {
    return new GatewayError(Errors.GATEWAY_UPSTREAM_TIMEOUT, { cause: 'The participant did not answer in time.' }, { reason: code, cause: error });
  }
  // Connection refused or reset, DNS failure, connect timeout, TLS verification failure, garbage
  // that is not HTTP: the participant is unavailable from here.
  return new GatewayError(Errors.GATEWAY_UPSTREAM_UNAVAILABLE, { cause: 'The participant is unavailable.' }, { reason: code ?? (error as Error)?.message ?? 'unknown', cause: error });
}
