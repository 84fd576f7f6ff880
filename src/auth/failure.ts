// Why a credential was refused: a bounded set, used as the metric label and in the log line.
// The token itself never appears in a reason or its detail.
import { Errors, GatewayError } from '../errors.js';

export const AUTH_FAILURE_REASONS = [
  'missing', // no bearer token (no Authorization header, another scheme, or only in the query string)
  'malformed', // not a compact JWS (three base64url parts), undecodable header or claims, repeated credentials
  'algorithm', // alg outside the issuer's pinned list (none, HS256 against an asymmetric key, ...)
  'bad_signature',
  'unknown_issuer', // no iss, or an iss that no configured issuer has
  'unknown_key', // no kid where a key set needs one, or no key with that kid after a refetch
  'keys_unavailable', // the issuer's key set was never fetched (or not within the bound)
  'expired',
  'not_yet_valid',
  'no_expiry', // exp is required (Canton `JwtVerifier.scala` checkTokenLifeTime)
  'lifetime', // exp - now above auth.maxTokenLifetimeSeconds (checkTokenLifeTime)
  'audience',
  'scope',
  'subject', // no sub: no Ledger API user id
  'unknown_gateway_key', // a gateway key (lgk_...) the key store does not hold
  'gateway_key_expired',
  'gateway_key_revoked',
  'gateway_key_source', // a gateway key used from an address outside its allowed sources
] as const;

export type AuthFailureReason = (typeof AUTH_FAILURE_REASONS)[number];

/** A refused credential. `detail` is for the log: fixed text and configuration values only. */
export class AuthFailure extends Error {
  readonly reason: AuthFailureReason;
  readonly detail: string | undefined;

  constructor(reason: AuthFailureReason, detail?: string) {
    super(detail === undefined ? reason : `${reason}: ${detail}`);
    this.name = 'AuthFailure';
    this.reason = reason;
    this.detail = detail;
  }
}

/**
 * The 401 in Canton's redacted form (`DecodedCantonError.scala`). RFC 6750 §3: a request without credentials
 * gets a bare `Bearer` challenge; a bad token gets `error="invalid_token"`. It closes the connection,
 * whether the refusal was known at once or after a signature check: a client whose credential was
 * refused sends no next call on it without connecting again.
 */
export function unauthenticated(failure: AuthFailure): GatewayError {
  const challenge = failure.reason === 'missing' ? 'Bearer' : 'Bearer error="invalid_token"';
  return new GatewayError(
    Errors.UNAUTHENTICATED,
    {},
    {
      headers: { 'WWW-Authenticate': challenge, connection: 'close' },
      reason: failure.message,
    },
  );
}
