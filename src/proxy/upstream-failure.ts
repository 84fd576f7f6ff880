// Why an upstream call failed, as the gateway's coded error (issue: 503 unreachable, 504 silent).
import { Errors, GatewayError } from '../errors.js';

const TIMEOUT_CODES = new Set(['UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT']);

/** Maps a transport failure before the participant's answer started; never leaks internals. */
export function upstreamFailure(error: unknown): GatewayError {
  if (error instanceof GatewayError) return error;
  // Only a string code is undici's or the socket's (a DOMException's `code` is a legacy number).
  const raw = (error as { code?: unknown } | null)?.code;
  const code = typeof raw === 'string' ? raw : undefined;
  if (
    (code !== undefined && TIMEOUT_CODES.has(code)) ||
    (error as { name?: unknown } | null)?.name === 'TimeoutError'
  ) {
    return new GatewayError(
      Errors.GATEWAY_UPSTREAM_TIMEOUT,
      { cause: 'The participant did not answer in time.' },
      { reason: code ?? 'TimeoutError', cause: error },
    );
  }
  // Connection refused or reset, DNS failure, connect timeout, TLS verification failure, garbage
  // that is not HTTP: the participant is unavailable from here.
  return new GatewayError(
    Errors.GATEWAY_UPSTREAM_UNAVAILABLE,
    { cause: 'The participant is unavailable.' },
    { reason: code ?? String((error as Error | null)?.message ?? 'unknown'), cause: error },
  );
}
