// Where the bearer token comes from (Canton `Endpoints.scala` `baseEndpoint`): the Authorization header, and for a
// WebSocket upgrade also the `jwt.token.<JWT>` element of Sec-WebSocket-Protocol. Pure functions
// over the raw header list, so that a repeated header is seen rather than merged or dropped.
// A token only in the query string is never looked at: it is missing.
import { subprotocolElements, WEBSOCKET_TOKEN_PREFIX } from '../exchange/subprotocols.js';
import { AuthFailure } from './failure.js';

/** RFC 6750 §2.1 b64token, and the compact JWS shape inside it (the signature may be empty: alg none). */
const B64TOKEN = /^[A-Za-z0-9\-._~+/]+=*$/;
const COMPACT_JWS = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*$/;

export { WEBSOCKET_TOKEN_PREFIX };

function headerValues(rawHeaders: readonly string[], lowerName: string): string[] {
  const values: string[] = [];
  for (let i = 0; i < rawHeaders.length; i += 2) {
    if (rawHeaders[i]!.toLowerCase() === lowerName) values.push(rawHeaders[i + 1] ?? '');
  }
  return values;
}

/** Where a token came from: named in the refusal of a malformed one. */
export type TokenSource = 'bearer token' | 'jwt.token. subprotocol';

/**
 * Refuses a token that is not a compact signed JWT (a bearer token first has to be an RFC 6750
 * b64token). The authenticator runs it only for a token its cache does not know: a cached token
 * passed it when it was first seen (the cache key is the token's SHA-256).
 */
export function checkTokenShape(token: string, source: TokenSource): void {
  if (COMPACT_JWS.test(token)) return;
  if (source === 'bearer token' && !B64TOKEN.test(token))
    throw new AuthFailure('malformed', 'the bearer token has characters outside RFC 6750 b64token');
  // Canton admin tokens (opaque secrets) and encrypted JWTs land here: the gateway verifies signed JWTs only.
  throw new AuthFailure('malformed', `the ${source} is not a compact signed JWT`);
}

/**
 * The one Authorization header's value, as the client sent it (a repeated header is refused). One
 * pass over the raw list on every call: a name is lower-cased only when it has the right length.
 */
export function authorizationHeader(rawHeaders: readonly string[]): string {
  let value: string | undefined;
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = rawHeaders[i]!;
    if (name.length !== 13 || name.toLowerCase() !== 'authorization') continue;
    // Node keeps only the first of repeated Authorization headers, but the forwarder sends the raw
    // list: the participant could read another token than the one verified here.
    if (value !== undefined) throw new AuthFailure('malformed', 'more than one Authorization header');
    value = rawHeaders[i + 1] ?? '';
  }
  if (value === undefined) throw new AuthFailure('missing', 'no Authorization header');
  return value;
}

/** The token of an Authorization header value `Bearer <token>` (RFC 6750 §2.1); its shape is checked by checkTokenShape. */
export function bearerTokenOf(header: string): string {
  const value = header.trim();
  const space = value.indexOf(' ');
  const scheme = space === -1 ? value : value.slice(0, space);
  if (scheme !== 'Bearer' && scheme.toLowerCase() !== 'bearer')
    throw new AuthFailure('missing', 'the Authorization scheme is not Bearer');
  const token = space === -1 ? '' : value.slice(space + 1).trimStart();
  if (token === '') throw new AuthFailure('malformed', 'empty bearer token');
  return token; // its shape: checkTokenShape
}

/** The token of an `Authorization: Bearer <token>` header (RFC 6750 §2.1); its shape is checked by checkTokenShape. */
export function bearerTokenFromHeaders(rawHeaders: readonly string[]): string {
  return bearerTokenOf(authorizationHeader(rawHeaders));
}

/**
 * The token of a WebSocket upgrade. The Authorization header wins when present (any Authorization
 * header: a malformed one is refused, never passed over for the subprotocol), as in Canton.
 * Otherwise the first Sec-WebSocket-Protocol element that starts with `jwt.token.` gives the token,
 * elements trimmed: a browser's `daml.ws.auth, jwt.token.X` carries X. Canton trims them since
 * digital-asset/canton#613 (`extractWsJwtToken` in ledger-json-api's json/v2/Endpoints.scala); an
 * older participant does not, and reads the same element only because the gateway forwards the list
 * without spaces. Tokens in two Sec-WebSocket-Protocol header lines are refused: a WebSocket client
 * sends its offer as one list, and a participant might read either line (the forwarded header is one).
 */
export function webSocketToken(rawHeaders: readonly string[]): { token: string; source: TokenSource } {
  if (headerValues(rawHeaders, 'authorization').length > 0)
    return { token: bearerTokenFromHeaders(rawHeaders), source: 'bearer token' };
  let offered: string | undefined;
  for (const value of headerValues(rawHeaders, 'sec-websocket-protocol')) {
    const first = subprotocolElements(value).find((element) => element.startsWith(WEBSOCKET_TOKEN_PREFIX));
    if (first === undefined) continue;
    if (offered !== undefined)
      throw new AuthFailure('malformed', 'a jwt.token. subprotocol in more than one Sec-WebSocket-Protocol header');
    offered = first;
  }
  if (offered === undefined) throw new AuthFailure('missing', 'no Authorization header and no jwt.token. subprotocol');
  // The first element decides even when it is empty, as in Canton: a later one is not tried.
  const token = offered.slice(WEBSOCKET_TOKEN_PREFIX.length);
  if (token === '') throw new AuthFailure('malformed', 'empty jwt.token. subprotocol');
  return { token, source: 'jwt.token. subprotocol' }; // its shape: checkTokenShape
}

/**
 * The `iss` a call's or upgrade's token names, unverified, or undefined when there is no readable
 * one (that token is refused by the stage anyway). Read only while a change of the participant's
 * identity providers is refreshed (live/participant-idps.ts): it decides whether the call waits.
 */
export function unverifiedIssuerOf(rawHeaders: readonly string[], kind: 'call' | 'upgrade'): string | undefined {
  try {
    const token = kind === 'call' ? bearerTokenOf(authorizationHeader(rawHeaders)) : webSocketToken(rawHeaders).token;
    const payload = token.split('.')[1];
    if (payload === undefined) return undefined;
    const iss = (JSON.parse(Buffer.from(payload, 'base64url').toString('utf8')) as { iss?: unknown } | null)?.iss;
    return typeof iss === 'string' ? iss : undefined;
  } catch {
    return undefined;
  }
}
